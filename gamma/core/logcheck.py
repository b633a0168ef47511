"""The log's rules across events: unique ids, references to earlier facts of the same
tenant, non-decreasing ``ts``.

They run against a ``LogIndex``, so the store can answer the same questions with indexed
lookups instead of re-reading its whole log; a batch in memory is checked in one pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, Protocol

from gamma.core.derivation import parse_derivation
from gamma.core.errors import (
    CycleError,
    DuplicateIdError,
    TimestampOrderError,
    UnknownReferenceError,
)
from gamma.core.model import Assert, Event, Experience

__all__ = ["LogIndex", "MemoryIndex", "check_events", "validate_log"]


class LogIndex(Protocol):
    """What log-level validation needs to know about the events already accepted."""

    def has_event(self, event_id: str) -> bool: ...
    def fact_tenant(self, fact_id: str) -> str | None: ...
    def fact_key(self, fact_id: str) -> str | None: ...
    def has_experience(self, experience_id: str) -> bool: ...
    def last_ts(self) -> datetime | None: ...


class MemoryIndex:
    """A LogIndex over events held in memory, filled as validation accepts them."""

    def __init__(self) -> None:
        self._events: set[str] = set()
        self._facts: dict[str, str] = {}
        self._keys: dict[str, str] = {}
        self._experiences: set[str] = set()
        self._last_ts: datetime | None = None

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

    def add(self, event: Event) -> None:
        self._events.add(event.id)
        if isinstance(event, Assert):
            self._facts[event.fact] = event.tenant
            self._keys[event.fact] = event.key
        elif isinstance(event, Experience):
            self._experiences.add(event.experience)
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
) -> None:
    """``validate_log`` of ``events``, where ``lines[i]`` is the line of ``events[i]`` (no
    ``lines``: line ``i + 1``, as for a log without blank lines).

    ``index`` holds what was accepted before this batch (a store); nothing is
    added to it. One pass, with the batch's ids, facts and experiences in local
    sets and the index asked only about what the batch does not hold.
    """
    ids: set[str] = set()
    facts: dict[str, str] = {}  # fact -> tenant, of this batch
    keys: dict[str, str] = {}  # fact -> key, of this batch
    experiences: set[str] = set()
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
        elif event.fact is not None:
            check_references(position, event, "", (event.fact,))


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
