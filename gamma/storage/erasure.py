"""Erasing committed values (issue 30, SPEC §9.4 and §21): ``Store.erase`` as named steps.

An erase is an event of the log (``erase``: the facts and commitments it destroys, the legal
basis, the writer), appended like any other; its transaction also records an ``erasures`` row
per fact and deletes the facts' value rows. Their bodies, hence every head, root, checkpoint
and proof, stay as they were. Then the bytes go: every writing connection of a store runs with
``secure_delete`` (a deleted row's bytes are overwritten with zeros in its page), the WAL, which
still holds the pages as they were before, is checkpointed into the file and truncated, and
the file is vacuumed (rebuilt in memory and written back), so no free page, no slack space in
a page and no earlier frame keeps the value or its salt.

The steps, in order (``STEPS``; ``Store.erase(on_step=...)`` is called after each, so a test
can kill the process there):

``planned``
    the erase event is built from the store's rows; nothing is written.
``redacted``
    the decision log beside the store (``STORE.decisions``, if any) has redacted the entries
    that name an erased fact or hold an erased value (``gamma.storage.decisions``), while the
    values are still at hand to look for. Killed here, the decision log has forgotten more
    than the store; the same erase, run again, completes it. (The other order would leave the
    value in the decision log with nothing left to find it by.) A decision log of format 1
    holding a match refuses, and nothing is changed anywhere.
``committed``
    one transaction: the erase event, its tree row, its ``erasures`` rows and the deletion of
    the value rows. Killed before its commit, nothing is erased; after it, all of it is, and
    the store verifies; the old bytes may remain in the WAL and the file until the next steps
    (or the next writer's open or close, which checkpoint).
``checkpointed``
    ``wal_checkpoint(TRUNCATE)`` completed: the file holds the zeroed pages and the WAL is
    empty. A reader holding an older snapshot blocks it: retried within the busy timeout, then
    ``StoreBusyError`` (exit 3) naming the readers; the erase stays committed.
``vacuumed``
    ``VACUUM`` (its temporary copy in memory) and a second truncating checkpoint: the file is
    rebuilt, so no slack space keeps a copy either.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs
import orjson
from sqlite_utils import Database

from gamma.core.terms.canonical import canonical_json
from gamma.core.terms.errors import (
    DuplicateIdError,
    InputError,
    StoreBusyError,
    UnknownReferenceError,
    ValueTypeError,
)
from gamma.core.terms.policy import Policy

__all__ = [
    "STEPS",
    "EraseResult",
    "Selection",
    "check_authority",
    "checkpoint",
    "derived_steps",
    "erase_object",
    "scrub",
    "select",
    "vacuum",
    "values_of",
]

STEPS = ("planned", "redacted", "committed", "checkpointed", "vacuumed")
"""The steps of an erase, in order (see the module's docstring)."""

_CHECKPOINT_PAUSE = 0.05


@attrs.frozen
class EraseResult:
    """What an erase did: the facts whose values it destroyed (in log order), its event's id,
    the events in the store now, and the head."""

    erased: tuple[str, ...]
    event: str
    events: int
    head: str

    def to_dict(self) -> dict[str, Any]:
        return {"erased": list(self.erased), "event": self.event, "events": self.events,
                "head": self.head}


@attrs.frozen(kw_only=True)
class Selection:
    """Which values of a tenant to erase: facts by id, every value of a key, of a data subject,
    or of the whole tenant (exactly one)."""

    tenant: str
    facts: tuple[str, ...] | None = None
    key: str | None = None
    subject: str | None = None
    all_of_tenant: bool = False

    def check(self) -> None:
        chosen = [self.facts is not None, self.key is not None, self.subject is not None,
                  self.all_of_tenant]
        if sum(chosen) != 1:
            raise InputError("give exactly one of facts, key, subject and all_of_tenant: what to"
                             " erase", field="facts")
        if self.facts is not None and not self.facts:
            raise InputError("name at least one fact to erase", field="facts")


def _refuse_plaintext() -> InputError:
    return ValueTypeError(
        "this store keeps plaintext values: its chain hashes each value, so none can be erased"
        " without breaking it; erasure needs a store made with commit_values (gamma init"
        " --commit-values, or gamma migrate STORE --commit-values --to NEW)",
        field="store",
    )


def check_authority(policy: Policy, actor: str) -> None:
    """The writer of an erase holds the policy's erasure authority (before anything is looked
    up: a writer without it learns nothing of the store)."""
    if not policy.may_erase(actor):
        held = policy.authority_ladder[policy.writer_rank(actor)]
        needed = policy.authority_ladder[policy.erasure_rank()]
        raise ValueTypeError(f"writer {actor!r} holds {held!r} authority; erasing needs"
                             f" {needed!r} (the policy's [erasure] authority)", field="actor")


_ROWS = (
    "SELECT e.position, e.fact, e.tenant, e.body, v.position IS NOT NULL, xe.id"
    " FROM events e LEFT JOIN event_values v ON v.position = e.position"
    " LEFT JOIN erasures x ON x.position = e.position"
    " LEFT JOIN events xe ON xe.position = x.erase_position"
)


def select(db: Database, selection: Selection, *, committed: bool) -> list[tuple[str, str]]:
    """The ``(fact, commitment)`` of the values ``selection`` names, in log order: the tenant's
    committed values not erased yet. A fact of another tenant and a fact that does not exist
    give the same error; one erased already names its erase; a key, subject or tenant with no
    value left is an error too (erasing twice changes nothing)."""
    if not committed:
        raise _refuse_plaintext()
    selection.check()
    tenant = selection.tenant
    if selection.facts is not None:
        return _named_facts(db, tenant, selection.facts)
    if selection.key is not None:
        rows = db.execute(f"{_ROWS} WHERE e.type = 'assert' AND e.tenant = ? AND e.key = ?"
                          " ORDER BY e.position", [tenant, selection.key])
        field, what = "key", f"of key {selection.key!r}"
    else:
        rows = db.execute(f"{_ROWS} WHERE e.type = 'assert' AND e.tenant = ? ORDER BY e.position",
                          [tenant])
        field, what = ("subject", f"about subject {selection.subject!r}") if (
            selection.subject is not None) else ("all_of_tenant", "")
    chosen = []
    for _, fact, _, body, kept, _ in rows:
        obj = orjson.loads(body)
        if not kept or (selection.subject is not None and obj.get("subject") != selection.subject):
            continue
        chosen.append((str(fact), str(obj["commitment"])))
    if not chosen:
        raise UnknownReferenceError(
            f"nothing to erase: tenant {tenant!r} holds no value {what} that is not erased"
            .replace("  ", " "), field=field)
    return chosen


def _named_facts(db: Database, tenant: str, facts: Sequence[str]) -> list[tuple[str, str]]:
    found: list[tuple[int, str, str]] = []
    seen: set[str] = set()
    for place, fact in enumerate(facts):
        field = f"facts[{place}]"
        if fact in seen:
            raise DuplicateIdError(f"fact {fact!r} is named twice", field=field)
        seen.add(fact)
        row = db.execute(f"{_ROWS} WHERE e.type = 'assert' AND e.fact = ?", [fact]).fetchone()
        if row is None or row[2] != tenant:  # one message: nothing of another tenant shows
            raise UnknownReferenceError(f"no fact {fact!r} in tenant {tenant!r}", field=field)
        position, _, _, body, kept, erased_by = row
        if erased_by is not None:
            raise ValueTypeError(f"fact {fact!r} is already erased by {erased_by}", field=field)
        commitment = orjson.loads(body).get("commitment")
        if not kept or commitment is None:
            raise ValueTypeError(f"fact {fact!r}: its value is not committed: only committed"
                                 " values can be erased", field=field)
        found.append((int(position), fact, str(commitment)))
    return [(fact, commitment) for _, fact, commitment in sorted(found)]


def values_of(db: Database, facts: Iterable[str]) -> list[Any]:
    """The stored values of ``facts`` (decoded), for the decision log to look for."""
    found = []
    for fact in facts:
        row = db.execute(
            "SELECT v.value FROM events e JOIN event_values v ON v.position = e.position"
            " WHERE e.type = 'assert' AND e.fact = ?", [fact]).fetchone()
        if row is not None:
            found.append(orjson.loads(row[0]))
    return found


def erase_object(
    chosen: Iterable[tuple[str, str]],
    *,
    tenant: str,
    actor: str,
    basis: str,
    event_id: str | None,
    position: int,
) -> dict[str, Any]:
    """The erase event's JSON object (``ts`` left to the store's stamp). Without an id, one is
    derived from the store's length, the tenant, the writer, the basis and the erased facts, so
    the same store and the same call give the same bytes."""
    erased = [{"commitment": commitment, "fact": fact} for fact, commitment in chosen]
    if event_id is None:
        seed = canonical_json([position, tenant, actor, basis, erased])
        event_id = "erase-" + hashlib.sha256(seed.encode("utf-8")).hexdigest()[:24]
    return {"type": "erase", "id": event_id, "actor": actor, "tenant": tenant, "basis": basis,
            "erased": erased}


def scrub(db: Database, path: Path, timeout: float) -> None:
    """``checkpoint``, then ``vacuum``: no byte of the file, its WAL or its index keeps a
    deleted value."""
    checkpoint(db, path, timeout)
    vacuum(db, path, timeout)


def vacuum(db: Database, path: Path, timeout: float) -> None:
    """Rebuild the file (its temporary copy in memory, never in a disk file) and checkpoint
    again: no free page and no slack space in a page keeps what was deleted."""
    db.execute("PRAGMA temp_store = MEMORY")
    db.execute("VACUUM")
    checkpoint(db, path, timeout)


def checkpoint(db: Database, path: Path, timeout: float) -> None:
    """Fold the WAL into the file and truncate it. A reader holding an older snapshot keeps
    the WAL alive: retried until ``timeout`` seconds have passed, then ``StoreBusyError``."""
    deadline = time.monotonic() + timeout
    while True:
        busy, frames, done = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy == 0 and frames in (0, -1) and done in (0, -1):
            return
        if time.monotonic() >= deadline:
            raise StoreBusyError(
                f"{path}: the erase is committed, but another connection reads an older snapshot"
                f" of the store ({frames} WAL frames, {done} checkpointed): until those readers"
                " finish, the erased values remain in its -wal file; end them, then the next"
                " writer that opens or closes the store scrubs it (Python: Store.scrub())"
            )
        time.sleep(_CHECKPOINT_PAUSE)


def derived_steps(on_step: Callable[[str], None] | None) -> Callable[[str], None]:
    """``on_step``, or a step that does nothing."""
    return on_step if on_step is not None else _nothing


def _nothing(step: str) -> None:
    return None
