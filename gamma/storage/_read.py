"""The read path's integrity checks: stored rows turned back into events, trusting what was
validated at append but re-checking cheaply what a reader relies on (positions without gaps,
each row's link and hash, and with an index the log's rules against what was read before).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import orjson

from gamma.core.integrity.chain import step_bytes
from gamma.core.integrity.commitment import commit
from gamma.core.integrity.merkle import TreeBuilder
from gamma.core.reading.logcheck import LogIndex, check_events
from gamma.core.reading.reader import read_stored
from gamma.core.terms.errors import InputError, IntegrityError
from gamma.core.terms.model import Assert, Event

__all__ = ["READ", "READ_JOINED", "check_stored"]

READ = "position, body, prev_head, head"
"""The columns of a row ``check_stored`` reads."""
READ_JOINED = "e.position, e.body, e.prev_head, e.head, v.salt, v.value, x.erase_position"
"""The columns of a committed store's row: an assert's value and salt joined back (or the
erase that deleted them), from ``gamma.storage.values.JOINED``."""


def check_stored(
    rows: Iterable[Sequence[Any]],
    *,
    since: int,
    prev: str,
    index: LogIndex | None,
    source: str,
    tree: TreeBuilder | None = None,
) -> tuple[list[Event], list[bytes]]:
    """Events from stored ``(position, body, prev_head, head)`` rows, and the head after each;
    a committed store's rows (``READ_JOINED``) add an assert's salt and value, which the event
    gets back (its chain bytes stay the body), or the position of the erase that deleted them.

    The cheap checks a reader owes the rows it relies on: consecutive
    positions from ``since + 1``, each row linked to the head before it and
    its body hashing to its head, a body that is an event, and (with
    ``index``, what was read before) unique ids, known references and ``ts``
    order. The first failure is an IntegrityError naming its position.
    Each body's bytes are also added to ``tree`` when one is given.
    """
    events: list[Event] = []
    heads: list[bytes] = []
    previous = bytes.fromhex(prev)
    expected = since + 1
    for row in rows:
        position, body, prev_head, head = row[0], row[1], row[2], row[3]

        def broken(detail: str, position: int = position) -> IntegrityError:
            return IntegrityError(f"{source}: position {position}: {detail}")

        if position != expected:
            raise IntegrityError(
                f"{source}: position {expected}: missing (the next row is position {position})"
            )
        if prev_head != previous.hex():
            raise broken(f"its previous head is not the head of position {position - 1}")
        data = body.encode("utf-8")
        current = step_bytes(previous, data)  # the bytes are kept for the tree
        if tree is not None:
            tree.add(data)
        if current.hex() != head:
            raise broken("its body does not hash to its head (edited)")
        if len(row) > 4 and (row[4] is not None or row[6] is None):
            events.append(_committed_event(body, row[4], row[5], broken))
        else:
            events.append(_stored_event(body, broken))
        heads.append(current)
        previous = current
        expected += 1
    if index is not None:
        try:
            check_events(events, range(since + 1, since + 1 + len(events)), index=index)
        except InputError as exc:
            raise IntegrityError(
                f"{source}: position {exc.line}: a stored event breaks the log ({exc.message})"
            ) from None
    return events, heads


def _committed_event(
    body: str, salt: str | None, value: str | None, broken: Callable[[str], IntegrityError]
) -> Event:
    """The event of a committed store's row: its value and salt joined back, and checked
    against the commitment its body carries (one hash: a changed value row is never read as
    the fact's value). An assert whose value is gone must have been erased (``erasures``)."""
    if salt is None or value is None:
        kept = _stored_event(body, broken)
        if isinstance(kept, Assert) and kept.commitment is not None and kept.value is None:
            raise broken("its value is gone but no erase event erased it (value_deleted)")
        return kept
    try:
        obj = orjson.loads(body)
        given = orjson.loads(value)
        matches = isinstance(obj, dict) and commit(salt, given) == obj.get("commitment")
    except (ValueError, TypeError):
        matches = False
    if not matches:
        raise broken("its value row does not match its commitment (value_changed)")
    obj["salt"], obj["value"] = salt, given
    event = read_stored(body, obj)
    if event is None:
        raise broken("its body is not an event")
    return event


def _stored_event(body: str, broken: Callable[[str], IntegrityError]) -> Event:
    """The event of a stored canonical body, keeping the body as its canonical text."""
    event = read_stored(body)
    if event is None:
        raise broken("its body is not an event")
    return event
