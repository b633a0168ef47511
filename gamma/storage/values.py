"""Committed values (issue 30, SPEC §9.2 and §21): what a committed store keeps beside its chain.

In a store made with ``commit_values`` (``store_meta`` row ``values`` = ``committed``), an
assert's ``body`` (what the chain and the Merkle leaf hash) holds the ``commitment`` to its value,
never the value; the value (its canonical JSON) and its salt live in ``event_values``, one row
per assert position. An erase event deletes those rows, and ``erasures`` records which fact each
one deleted and by which erase. So the log's heads, roots and proofs never depend on a value,
and deleting one breaks none of them.

This module is the one place that knows those rows: the lines a reader writes (``line_of``:
the body with its value and salt joined back), the rows an append writes (``value_row``) and
``ValueCheck``, the pass of ``verify`` that tells an erased value from a tampered one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson
from sqlite_utils import Database

from gamma.core.integrity.commitment import commit, is_hex_digest
from gamma.core.terms.canonical import canonical_json, compact_json
from gamma.core.terms.model import Assert, Event

__all__ = [
    "COMMITTED",
    "ERASURE_KINDS",
    "JOINED",
    "Problem",
    "VALUES",
    "ValueCheck",
    "check_value_rows",
    "is_committed",
    "line_of",
    "value_row",
]

VALUES = "values"
"""The ``store_meta`` row saying how a store keeps values (absent: plaintext)."""
COMMITTED = "committed"

JOINED = (
    "FROM events e LEFT JOIN event_values v ON v.position = e.position"
    " LEFT JOIN erasures x ON x.position = e.position"
)
"""The events with their value rows and erasures (a committed store's read)."""

ERASURE_KINDS = ("value_changed", "value_deleted", "erasure_forged")
"""What ``ValueCheck`` names: a value row that does not match its commitment (or has no
committed assert), a value gone with no erasure, an erasure no erase event backs."""

#: A problem a check finds: kind, position, event id, detail
Problem = tuple[str, int | None, str | None, str]


def is_committed(meta: Mapping[str, str]) -> bool:
    """Whether a store's metadata says it keeps committed values."""
    return meta.get(VALUES) == COMMITTED


def line_of(body: str, salt: str | None, value: str | None) -> str:
    """The JSONL line of a stored event (``gamma.core.reading.events.event_line``): its body, with its
    value and salt joined back while they are kept; an erased or plaintext event is its body."""
    if salt is None or value is None:
        return body
    obj = orjson.loads(body)
    obj["salt"] = salt
    obj["value"] = orjson.loads(value)
    return compact_json(obj)


def value_row(position: int, event: Event) -> list[Any] | None:
    """The ``event_values`` row of an assert with a committed value at ``position``, else None."""
    if not isinstance(event, Assert) or event.salt is None or event.value is None:
        return None
    return [position, event.salt, canonical_json(event.value)]


def _commitment_of(body: str) -> tuple[str | None, str | None, Any]:
    """The type, fact and commitment a stored body names (None where it has none)."""
    try:
        obj = orjson.loads(body)
    except ValueError:
        return None, None, None
    if not isinstance(obj, dict):
        return None, None, None
    return obj.get("type"), obj.get("fact"), obj


class ValueCheck:
    """``verify``'s pass over a committed store's values, fed the joined rows in position order
    (``position, id, body, salt, value, erased_fact, erase_position``).

    A value row must match the commitment in its assert's body (``value_changed``); a committed
    assert without one must be named by an ``erasures`` row (``value_deleted``); every erasure
    must be the work of an erase event after the assert that names the fact with its
    commitment, and every fact an erase event names must be erased (``erasure_forged``). Value
    and erasure rows at positions with no such assert are checked by ``orphans``. What is held
    between rows is the commitment of each fact erased later, and the erase events seen."""

    def __init__(self) -> None:
        #: assert position -> (fact, commitment, erase position, event id), until its erase
        self._pending: dict[int, tuple[str, str, int, str]] = {}
        self.erased = 0
        self.erase_events: list[str] = []

    def feed(self, rows: Iterable[Sequence[Any]]) -> Problem | None:
        for position, event_id, body, salt, value, erased_fact, erase_position in rows:
            found = self._row(position, str(event_id), str(body), salt, value, erased_fact,
                              erase_position)
            if found is not None:
                return found
        return None

    def _row(self, position: int, event_id: str, body: str, salt: Any, value: Any,
             erased_fact: Any, erase_position: Any) -> Problem | None:
        kind, fact, obj = _commitment_of(body)
        if kind == "erase":
            return self._erase(position, event_id, obj)
        commitment = obj.get("commitment") if isinstance(obj, dict) else None
        if kind != "assert" or not is_hex_digest(commitment):
            if salt is not None or erased_fact is not None:
                return ("value_changed", position, event_id,
                        f"position {position} (event {event_id}) holds a value or an erasure but"
                        " commits to no value: a row of event_values or erasures was added")
            return None
        if erased_fact is not None:
            if salt is not None:
                return ("erasure_forged", position, event_id,
                        f"position {position} (event {event_id}): an erasure names it but its"
                        " value is still there")
            if erased_fact != fact or not isinstance(erase_position, int) or erase_position <= position:
                return self._forged(position, event_id)
            self._pending[position] = (str(fact), str(commitment), erase_position, event_id)
            return None
        if salt is None:
            if "value" in obj:  # a plaintext assert: nothing beside the chain
                return None
            return ("value_deleted", position, event_id,
                    f"position {position} (event {event_id}): its value row was deleted, and no"
                    " erase event erased it")
        try:
            matches = is_hex_digest(salt) and commit(str(salt), orjson.loads(value)) == commitment
        except (ValueError, TypeError):
            matches = False
        if not matches:
            return ("value_changed", position, event_id,
                    f"position {position} (event {event_id}): its value row does not match the"
                    " commitment its event carries: the value or its salt was changed")
        return None

    def _forged(self, position: int, event_id: str) -> Problem:
        return ("erasure_forged", position, event_id,
                f"position {position} (event {event_id}): its erasures row names no erase event"
                " that erased it: the erasure was forged (or the value deleted behind one)")

    def _erase(self, position: int, event_id: str, obj: Any) -> Problem | None:
        self.erase_events.append(event_id)
        named = obj.get("erased") if isinstance(obj, dict) else None
        named = named if isinstance(named, list) else []
        wanted = {str(item.get("fact")): str(item.get("commitment")) for item in named
                  if isinstance(item, dict)}
        erased = {p: item for p, item in self._pending.items() if item[2] == position}
        for assert_position, (fact, commitment, _, assert_id) in sorted(erased.items()):
            if wanted.get(fact) != commitment:
                return self._forged(assert_position, assert_id)
            del self._pending[assert_position]
        if len(erased) != len(wanted):
            return ("erasure_forged", position, event_id,
                    f"position {position} (erase event {event_id}) names {len(wanted)} values"
                    f" but the store erased {len(erased)} of them: a value it erased is still"
                    " there, or an erasure row was deleted")
        self.erased += len(erased)
        return None

    def finish(self) -> Problem | None:
        """Erasures whose erase event never came."""
        for position, (_, _, _, event_id) in sorted(self._pending.items()):
            return self._forged(position, event_id)
        return None


def check_value_rows(db: Database, check: ValueCheck, *, committed: bool,
                     chunk: int) -> Problem | None:
    """``verify``'s pass over a store's value and erasure rows (``ValueCheck``, inside the
    caller's snapshot): rows at positions with no committed assert first (in a plaintext
    store, any row), then the joined rows ``chunk`` at a time."""
    if not db.table("event_values").exists():  # read at a schema before 5
        return None
    orphan = db.execute(
        "SELECT min(position) FROM (SELECT position FROM event_values UNION ALL SELECT"
        " position FROM erasures) WHERE ? OR position NOT IN (SELECT position FROM events)",
        [not committed],
    ).fetchone()[0]
    if orphan is not None:
        return ("value_changed", int(orphan), None, f"position {orphan}: a value or erasure"
                " row with no committed event of the store: the row was added")
    if not committed:
        return None
    cursor = db.execute(
        "SELECT e.position, e.id, e.body, v.salt, v.value, x.fact, x.erase_position"
        f" {JOINED} ORDER BY e.position"
    )
    while rows := cursor.fetchmany(chunk):
        found = check.feed(rows)
        if found is not None:
            return found
    return check.finish()
