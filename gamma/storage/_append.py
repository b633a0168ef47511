"""The append path's batch semantics: items decoded and checked before the lock, a missing
``ts`` stamped under it, events already stored skipped, the clock-skew bound, and the chained
rows ``Store.append`` inserts.

An event appended without ``ts`` is stamped with max(clock, the head's ``ts``); an event
byte-identical to a stored one is skipped so that a writer that died after commit can
retry; the same id with other content stays in the batch for ``validate_log`` to refuse.
Ids and references are checked with indexed queries (``SqlIndex``), never by re-reading
the log.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

import orjson
from sqlite_utils import Database

from gamma.core.integrity.chain import GENESIS_HEX, keyed_step, step, step_bytes
from gamma.core.integrity.commitment import new_salt
from gamma.core.integrity.merkle import leaf_hash
from gamma.core.reading.events import canonical_event
from gamma.core.reading.reader import read_object, read_objects
from gamma.core.terms.canonical import compact_json, format_ts
from gamma.core.terms.errors import InputError, IntegrityError, StoreError, ValueTypeError
from gamma.core.terms.model import Assert, Erase, Event, Experience, Migrate
from gamma.core.terms.policy import Policy
from gamma.storage._opening import read_meta
from gamma.storage.migrations import LATEST, from_micros, schema_rows, ts_micros
from gamma.storage.seal import seal_problem
from gamma.storage.values import value_row
from gamma.storage.verify import ChainRow, column_problem

__all__ = [
    "COLUMNS",
    "SELECTED",
    "Appendable",
    "Parsed",
    "Pending",
    "Sealed",
    "SqlIndex",
    "Tail",
    "chain_rows",
    "check_extendable",
    "check_values",
    "value_rows",
    "new_events",
    "parse_batch",
    "read_tail",
]

COLUMNS = list(ChainRow._fields)
"""The events table's columns, in the order of a row from ``chain_rows``."""
#: The chain columns in ``ChainRow`` order, as a SELECT lists them
SELECTED = ", ".join(COLUMNS)
_PLACEHOLDER_TS = "1970-01-01T00:00:00Z"  # stands in for an omitted ts until the store stamps it
_LOOKUP_CHUNK = 500

Appendable = str | Mapping[str, Any] | Event

Pending = tuple[int | None, Event, str]
"""An event to store: its line in the batch, the event and its canonical body."""


class Parsed(NamedTuple):
    line: int
    event: Event
    unstamped: dict[str, Any] | None  # the written object, when the store must stamp its ts


class Tail(NamedTuple):
    """The last stored row: its position, plain and keyed heads, and ``ts`` (None when empty)."""

    position: int
    head: str
    keyed_head: str
    ts: datetime | None


class SqlIndex:
    """The LogIndex of gamma.core.reading.events answered by indexed queries on the events table."""

    def __init__(self, db: Database, last_ts: datetime | None) -> None:
        self._db = db
        self._last_ts = last_ts

    def has_event(self, event_id: str) -> bool:
        return (
            self._db.execute("SELECT 1 FROM events WHERE id = ?", [event_id]).fetchone() is not None
        )

    def fact_tenant(self, fact_id: str) -> str | None:
        row = self._db.execute(
            "SELECT tenant FROM events WHERE type = 'assert' AND fact = ?", [fact_id]
        ).fetchone()
        return None if row is None else str(row[0])

    def fact_key(self, fact_id: str) -> str | None:
        row = self._db.execute(
            "SELECT key FROM events WHERE type = 'assert' AND fact = ?", [fact_id]
        ).fetchone()
        return None if row is None else str(row[0])

    def has_experience(self, experience_id: str) -> bool:
        query = "SELECT 1 FROM events WHERE type = 'experience' AND experience = ?"
        return self._db.execute(query, [experience_id]).fetchone() is not None

    def fact_commitment(self, fact_id: str) -> str | None:
        row = self._db.execute(
            "SELECT body FROM events WHERE type = 'assert' AND fact = ?", [fact_id]
        ).fetchone()
        if row is None:
            return None
        found = orjson.loads(row[0]).get("commitment")  # the body of a committed assert has it
        return found if isinstance(found, str) else None

    def erased_by(self, fact_id: str) -> str | None:
        row = self._db.execute(
            "SELECT e.id FROM erasures x JOIN events e ON e.position = x.erase_position"
            " WHERE x.fact = ?", [fact_id]
        ).fetchone()
        return None if row is None else str(row[0])

    def last_ts(self) -> datetime | None:
        return self._last_ts


def parse_batch(
    items: Iterable[Appendable] | str, policy: Policy, source: str, *, committed: bool = False
) -> list[Parsed]:
    """Decode and check each item; an object without ts is kept for the store to stamp. In a
    committed store an assert written with a plain value gets a fresh salt here (the one
    randomness of gamma, kept with the event); a plaintext store refuses committed values,
    erase and migrate events."""
    parsed = []
    for number, obj in read_objects(items, source=source):
        if committed and isinstance(obj, dict) and obj.get("type") == "assert" and (
            "value" in obj and "salt" not in obj and "commitment" not in obj
        ):
            obj = {**obj, "salt": new_salt()}
        unstamped = obj if isinstance(obj, dict) and "ts" not in obj else None
        if unstamped is not None:  # checked now with a stand-in ts, stamped under the lock
            obj = {**obj, "ts": _PLACEHOLDER_TS}
        event = read_object(obj, policy=policy, source=source, line=number, keep_text=False)
        if not committed:
            _refuse_committed(event, source, number)
        parsed.append(Parsed(number, event, unstamped))
    return parsed


_PLAINTEXT = "this store keeps plaintext values: "


def _refuse_committed(event: Event, source: str, line: int) -> None:
    """A plaintext store holds no commitment, erases nothing and migrates nothing."""
    if isinstance(event, Assert):
        for name in ("salt", "commitment"):
            if getattr(event, name) is not None:
                raise ValueTypeError(
                    _PLAINTEXT + "an assert with a salt or a commitment goes to a store made"
                    " with commit_values (gamma init --commit-values, or gamma migrate --commit-values)",
                    source=source, line=line, field=name,
                )
    elif isinstance(event, (Erase, Migrate)):
        raise ValueTypeError(
            _PLAINTEXT + f"a {event.TYPE} event goes to a store made with commit_values; a"
            " plaintext value cannot be erased without breaking the chain",
            source=source, line=line, field="type",
        )


def read_tail(db: Database) -> Tail:
    """The last stored row, read under the write lock."""
    last = db.execute(
        "SELECT position, head, keyed_head, ts_us FROM events ORDER BY position DESC LIMIT 1"
    ).fetchone()
    if last is None:
        return Tail(0, GENESIS_HEX, GENESIS_HEX, None)
    return Tail(int(last[0]), str(last[1]), str(last[2] or GENESIS_HEX), from_micros(last[3]))


def new_events(
    db: Database,
    parsed: list[Parsed],
    *,
    policy: Policy,
    last_ts: datetime | None,
    clock: datetime,
    source: str,
) -> list[Pending]:
    """Stamp missing ts and drop events identical to stored (or earlier) ones.

    An id reused with other content stays in the batch, so that
    validate_log reports it in line order with every other error.
    """
    stored = _stored_ids(db, {item.event.id for item in parsed})
    pending: list[Pending] = []
    floor = last_ts
    horizon = clock + timedelta(seconds=policy.clock_skew_seconds)
    for line, event, unstamped in parsed:
        # only a stored event is skipped: a batch repeating one of its own events is
        # refused (validate_log: duplicate id), as a JSONL file repeating a line is
        earlier = stored.get(event.id)
        if unstamped is not None:
            if earlier:
                ts = earlier[1]
            elif floor is not None and floor > clock:
                raise InputError(
                    f"the log's last event is stamped {format_ts(floor)}, ahead of the"
                    f" store's clock ({format_ts(clock)}): an event is never stamped ahead"
                    " of the clock; give its ts",
                    source=source, line=line, field="ts",
                )
            else:
                ts = clock if floor is None else max(clock, floor)
            stamped = {**unstamped, "ts": format_ts(ts)}
            event = read_object(stamped, policy=policy, source=source, line=line, keep_text=False)
        canonical = canonical_event(event)
        if earlier is not None and _same(earlier, event, canonical):
            continue
        if event.ts > horizon:
            raise InputError(
                f"ts {format_ts(event.ts)} is more than {policy.clock_skew_seconds} s"
                f" ahead of the store's clock ({format_ts(clock)})",
                source=source, line=line, field="ts",
            )
        pending.append((line, event, canonical))
        floor = event.ts
    return pending


def _same(earlier: tuple[str, datetime, str | None], event: Event, canonical: str) -> bool:
    """Whether ``event`` is the stored one sent again: the same bytes, or (a committed value)
    the same event and value under another salt, or none (a resend without its salt gets a
    fresh one). An erased value is never the same again: the id is then refused as used."""
    body, _, value = earlier
    if canonical == body:
        return True
    if not isinstance(event, Assert) or event.salt is None or event.value is None or value is None:
        return False
    stored, sent = orjson.loads(body), orjson.loads(canonical)
    stored.pop("commitment", None)
    sent.pop("commitment", None)
    return compact_json(stored) == compact_json(sent) and compact_json(event.value) == value


def _stored_ids(db: Database, ids: set[str]) -> dict[str, tuple[str, datetime, str | None]]:
    """Bodies, ts and kept values of the stored events among ``ids``, in a few indexed queries."""
    found: dict[str, tuple[str, datetime, str | None]] = {}
    wanted = sorted(ids)
    for start in range(0, len(wanted), _LOOKUP_CHUNK):
        chunk = wanted[start : start + _LOOKUP_CHUNK]
        marks = ",".join("?" * len(chunk))
        for event_id, body, ts_us, value in db.execute(
            "SELECT e.id, e.body, e.ts_us, v.value FROM events e LEFT JOIN event_values v"
            f" ON v.position = e.position WHERE e.id IN ({marks})", chunk
        ):
            found[str(event_id)] = (str(body), from_micros(ts_us), None if value is None else str(value))
    return found


Sealed = tuple[dict[str, str], list[tuple[int, str]]]
"""Metadata and schema rows a writer has checked under its seal."""


def check_extendable(
    db: Database, path: Path, tail: Tail, key: bytes | None, *, checked: Sealed | None
) -> Sealed:
    """Under the write lock: the store's seal verifies with the writer's key, and the row the
    batch extends is intact (its link, hash, keyed link and tree row), in O(1) queries.

    A writer never re-seals or extends what it cannot check (SPEC §9.4). ``checked`` is what
    this writer verified before (the policy digest is recomputed only when the rows changed).
    """
    sealed = (read_meta(db, path), schema_rows(db))
    version = max((v for v, _ in sealed[1]), default=0)
    if version != LATEST:  # a keyed store is migrated only with its seal (Store.seal)
        problem = seal_problem(*sealed, key)
        if problem is not None:
            raise IntegrityError(f"{path}: refusing to extend a store that does not verify: {problem[1]}")
        raise StoreError(f"{path}: schema_version {version}: a writer extends only a store of"
                         f" schema {LATEST}: opening it for writing migrates it, a keyed one"
                         " with `gamma migrate STORE --key-file K --expect-policy D`")
    if sealed != checked:
        problem = seal_problem(*sealed, key)
        if problem is not None:
            raise IntegrityError(f"{path}: refusing to extend a store that does not verify: {problem[1]}")
    if tail.position:
        _check_tail(db, path, tail.position, key)
    return sealed


def _check_tail(db: Database, path: Path, position: int, key: bytes | None) -> None:
    """The row the batch extends: its link, hash, keyed link and tree row, and its indexed
    columns against its body (ids, references and the ts order are checked by them)."""
    row = ChainRow(*db.execute(f"SELECT {SELECTED} FROM events WHERE position = ?", [position]).fetchone())
    before = db.execute("SELECT keyed_head FROM events WHERE position = ?", [position - 1]).fetchone()
    tree = db.execute(
        "SELECT position, hashes FROM tree ORDER BY position DESC LIMIT 1"
    ).fetchone()
    body, prev_head, head, keyed_head = row.body, row.prev_head, row.head, row.keyed_head
    data = str(body).encode("utf-8")
    try:
        problem = None
        if step_bytes(bytes.fromhex(str(prev_head)), data).hex() != head:
            problem = "its body does not hash to its head"
        elif (column := column_problem(row)) is not None:
            problem = column[3].removeprefix(f"position {position} ")
        elif key is not None:
            keyed_prev = GENESIS_HEX if before is None else str(before[0])
            if keyed_step(key, bytes.fromhex(keyed_prev), str(body)).hex() != keyed_head:
                problem = "its keyed head is not the keyed link from the row before"
        if problem is None and (tree is None or tree[0] != position
                                or bytes(tree[1][:32]) != leaf_hash(data)):
            problem = "the tree's last row is not this event's leaf"
    except (ValueError, TypeError):
        problem = "a head is not hex"
    if problem is not None:
        raise IntegrityError(
            f"{path}: refusing to extend a store that does not verify: position {position}: {problem}"
        )


def check_values(pending: list[Pending], source: str) -> None:
    """A committed store keeps every assert's value until an erase names it: an assert that
    comes without its value (erased) is taken only in the batch of the erase that names it."""
    erased = {item.fact for _, event, _ in pending if isinstance(event, Erase) for item in event.erased}
    for line, event, _ in pending:
        if isinstance(event, Assert) and event.value is None and event.fact not in erased:
            raise ValueTypeError(
                "a committed store keeps the value of each assert until an erase event names"
                " it: an erased assert (a commitment without its value) is appended only in the"
                " batch of the erase that names it",
                source=source, line=line, field="value",
            )


def value_rows(
    db: Database, start: int, pending: list[Pending]
) -> tuple[list[list[Any]], list[list[Any]]]:
    """The ``event_values`` rows of the batch appended after position ``start`` (none for a
    value the same batch erases) and its ``erasures`` rows ``(position, fact, erase_position)``."""
    asserted = {
        event.fact: start + offset
        for offset, (_, event, _) in enumerate(pending, start=1)
        if isinstance(event, Assert)
    }
    erasures: list[list[Any]] = []
    for offset, (_, event, _) in enumerate(pending, start=1):
        if not isinstance(event, Erase):
            continue
        for item in event.erased:
            position = asserted.get(item.fact)
            if position is None:
                row = db.execute(
                    "SELECT position FROM events WHERE type = 'assert' AND fact = ?", [item.fact]
                ).fetchone()
                position = int(row[0])  # the log's rules found it (validate_log)
            erasures.append([position, item.fact, start + offset])
    gone = {row[0] for row in erasures}
    values = []
    for offset, (_, event, _) in enumerate(pending, start=1):
        row = value_row(start + offset, event)
        if row is not None and row[0] not in gone:
            values.append(row)
    return values, erasures


def chain_rows(
    tail: Tail, pending: list[Pending], key: bytes | None
) -> tuple[list[list[Any]], str]:
    """The rows of ``pending`` chained onto ``tail`` (the keyed chain too with ``key``), and
    the plain head after the last."""
    rows: list[list[Any]] = []
    position = tail.position
    prev, keyed_prev = bytes.fromhex(tail.head), bytes.fromhex(tail.keyed_head)
    for _, event, canonical in pending:
        position += 1
        current = step(prev, canonical)
        keyed_now = keyed_step(key, keyed_prev, canonical) if key is not None else None
        rows.append(_row(position, event, canonical, prev.hex(), current.hex(), keyed_now))
        prev, keyed_prev = current, keyed_now or keyed_prev
    return rows, prev.hex()


def _row(
    position: int, event: Event, canonical: str, prev: str, head: str, keyed: bytes | None
) -> list[Any]:
    return [
        position,
        event.id,
        event.TYPE,
        event.tenant,
        ts_micros(event.ts),
        getattr(event, "fact", None),
        getattr(event, "key", None),
        event.experience if isinstance(event, Experience) else None,
        canonical,
        prev,
        head,
        keyed.hex() if keyed is not None else None,
    ]
